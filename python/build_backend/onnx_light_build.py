"""The build backend of the source distribution: maturin's, behind a check for Rust.

Binary wheels need no compiler. Building from source does, and maturin's own backend, finding
no `cargo`, fetches a Rust toolchain from the network (minutes, silently); this one stops at once
with a one-line message instead. Set ONNX_LIGHT_FETCH_RUST=1 to let maturin fetch Rust.
"""

from __future__ import annotations

import os
import shutil

import maturin
from maturin import build_sdist, get_requires_for_build_sdist  # noqa: F401  (needs cargo too)

_MESSAGE = (
    "onnx_light: building from source needs Rust (cargo on PATH, e.g. from https://rustup.rs); "
    "binary wheels need nothing: pip install --only-binary onnx_light onnx_light"
)


def _require_cargo() -> None:
    if os.environ.get("ONNX_LIGHT_FETCH_RUST") or shutil.which("cargo"):
        return
    raise SystemExit(_MESSAGE)


def get_requires_for_build_wheel(config_settings=None):
    _require_cargo()
    return maturin.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_editable(config_settings=None):
    _require_cargo()
    return maturin.get_requires_for_build_editable(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _require_cargo()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _require_cargo()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _require_cargo()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
