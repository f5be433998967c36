"""The onnx wheel's backend test data: every model and every serialized proto, with the message
type each .pb file holds (found from the model input/output it belongs to)."""
import pathlib

import onnx

DATA = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data"


def _pb_type(tp: onnx.TypeProto) -> str:
    which = tp.WhichOneof("value")
    return {
        "sequence_type": "SequenceProto",
        "optional_type": "OptionalProto",
        "map_type": "MapProto",
    }.get(which, "TensorProto")


def models() -> list[pathlib.Path]:
    return sorted(DATA.rglob("*.onnx"))


def protos() -> list[tuple[pathlib.Path, str]]:
    """Every .pb file with its message type name (TensorProto unless the model says otherwise)."""
    types: dict[pathlib.Path, str] = {}
    for model_path in models():
        model = onnx.load(model_path, load_external_data=False)
        init_names = {t.name for t in model.graph.initializer}
        ins = [v for v in model.graph.input if v.name not in init_names]
        outs = list(model.graph.output)
        for pb in model_path.parent.glob("test_data_set_*/*.pb"):
            kind, _, idx = pb.stem.partition("_")
            vals = ins if kind == "input" else outs
            if idx.isdigit() and int(idx) < len(vals):
                types[pb] = _pb_type(vals[int(idx)].type)
    return [(pb, types.get(pb, "TensorProto")) for pb in sorted(DATA.rglob("*.pb"))]


def message_class(name: str):
    return getattr(onnx, name)
