"""The installed package as a distribution: its version and its licence files."""
import importlib.metadata
import os

import onnx_light


def test_version_is_the_distributions():
    # One version for everything (the top-level Cargo.toml's [workspace.package]): the module's,
    # compiled into the extension, and the wheel's metadata, which maturin takes from Cargo.toml.
    assert onnx_light.__version__ == importlib.metadata.version("onnx_light")
    assert onnx_light.__version__.count(".") == 2


def test_the_wheel_holds_the_licences():
    package = os.path.dirname(onnx_light.__file__)
    licence = open(os.path.join(package, "LICENSE"), encoding="utf-8").read()
    assert "Apache License" in licence and "Version 2.0" in licence
    third_party = open(os.path.join(package, "THIRD_PARTY_LICENSES.txt"), encoding="utf-8").read()
    # The crates every build links (pyo3, the allocator), each with its licence text.
    for crate in ("pyo3 ", "mimalloc ", "libmimalloc-sys "):
        assert f"\n{crate}" in third_party, crate
    assert "(*)" not in third_party  # cargo tree's repeat marker is not part of a listing
    if onnx_light._native.HAS_ONNX_CXX:
        assert "\nonnx " in third_party
    # ... and the wheel's metadata names both (PEP 639 License-File).
    declared = importlib.metadata.metadata("onnx_light").get_all("License-File") or []
    assert {os.path.basename(f) for f in declared} >= {"LICENSE", "THIRD_PARTY_LICENSES.txt"}, declared
