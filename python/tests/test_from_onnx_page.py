"""docs/from-onnx.md names every public name of onnx's Python modules, and every name it marks
as there (same, onnx's code, differs) is there in onnx_light."""
import importlib
import inspect
import pathlib
import re

import onnx

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "from-onnx.md"
MODULES = ["onnx", "onnx.checker", "onnx.compose", "onnx.defs", "onnx.external_data_helper",
           "onnx.helper", "onnx.numpy_helper", "onnx.parser", "onnx.printer", "onnx.reference",
           "onnx.serialization", "onnx.shape_inference", "onnx.utils", "onnx.version_converter",
           "onnx.inliner", "onnx.model_container"]
THERE = {"same", "onnx's code", "differs"}


def public_names(module):
    m = importlib.import_module(module)
    names = getattr(m, "__all__", None)
    if names is None:
        names = [n for n in dir(m) if not n.startswith("_")
                 and (inspect.isfunction(getattr(m, n)) or inspect.isclass(getattr(m, n)))
                 and getattr(getattr(m, n), "__module__", "").startswith(module)]
    return set(names)


def rows():
    """(module, names, status) of every table row; "every other name of X.__all__" rows stand
    for the names of that list no other row of the module names."""
    out = []
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("onnx") and cells[2] in THERE | {"not provided"}:
            out.append((cells[0], cells[1], cells[2]))
    return out


def listed():
    """module -> {name: status}."""
    out: dict = {}
    for module, text, status in rows():
        names = out.setdefault(module, {})
        for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", text):
            names[name] = status
    for module, text, status in rows():
        if "every" in text and "__all__" in text:
            for name in public_names(module) - set(out[module]):
                out[module][name] = status
    return out


def onnx_light_module(module):
    return importlib.import_module(module.replace("onnx", "onnx_light", 1))


def test_every_public_name_of_onnx_is_on_the_page():
    names = listed()
    assert onnx.__version__.startswith("1.23")
    missing = {m: sorted(public_names(m) - set(names.get(m, {}))) for m in MODULES}
    assert not any(missing.values()), {m: v for m, v in missing.items() if v}


def test_every_name_marked_there_is_there():
    absent = []
    for module, names in listed().items():
        for name, status in names.items():
            if status in THERE and not hasattr(onnx_light_module(module), name):
                absent.append(f"{module}.{name}")
    assert not absent, absent
