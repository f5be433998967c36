"""Memory reused between loads (docs/python.md "Memory kept for the next load"): the large
payload regions of a dropped model are kept for the next load, never while an array still uses
them, and the limit and release functions work."""
import gc

import numpy as np

import onnx_light as ol
from onnx_light import numpy_helper

N = 1 << 20  # float32 elements: 4 MiB, a region of its own
# The first block a parse cuts repeated-field chunks from (the model's metadata), kept and taken
# back like the payload regions (docs/design.md, "Metadata memory").
META = 256 << 10


def write_model(path, seed):
    values = (np.arange(N, dtype=np.float32) * 0.5 + seed).reshape(1024, 1024)
    m = ol.ModelProto(ir_version=10)
    m.graph.name = "g"
    m.graph.initializer.append(numpy_helper.from_array(values, "w"))
    ol.save(m, str(path))
    return values


def test_a_dropped_models_memory_serves_the_next_load(tmp_path):
    old = ol.memory_reuse_limit()
    try:
        ol.set_memory_reuse_limit(256 << 20)
        assert ol.memory_reuse_limit() == 256 << 20
        ol.release_memory_held_for_reuse()
        v1 = write_model(tmp_path / "one.onnx", 1)
        v2 = write_model(tmp_path / "two.onnx", 2)
        m = ol.load(str(tmp_path / "one.onnx"))
        a = numpy_helper.to_array(m.graph.initializer[0])
        np.testing.assert_array_equal(a, v1)
        del m
        gc.collect()
        # The array still uses the region: only the metadata block is kept, and a new load
        # cannot take the region (it takes the metadata block).
        assert ol.memory_held_for_reuse() == META
        m2 = ol.load(str(tmp_path / "two.onnx"))
        np.testing.assert_array_equal(a, v1)
        np.testing.assert_array_equal(numpy_helper.to_array(m2.graph.initializer[0]), v2)
        del a
        gc.collect()
        assert ol.memory_held_for_reuse() == 4 * N
        # A load of the same shapes takes it back and holds its own values.
        m3 = ol.load(str(tmp_path / "one.onnx"))
        assert ol.memory_held_for_reuse() == 0
        np.testing.assert_array_equal(numpy_helper.to_array(m3.graph.initializer[0]), v1)
        del m2, m3
        gc.collect()
        assert ol.memory_held_for_reuse() == 8 * N + 2 * META
        assert ol.release_memory_held_for_reuse() == 8 * N + 2 * META
        assert ol.memory_held_for_reuse() == 0
        # Limit 0: nothing is kept.
        ol.set_memory_reuse_limit(0)
        m = ol.load(str(tmp_path / "one.onnx"))
        del m
        gc.collect()
        assert ol.memory_held_for_reuse() == 0
    finally:
        ol.set_memory_reuse_limit(old)
