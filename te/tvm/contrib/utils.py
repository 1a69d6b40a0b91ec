"""tvm.contrib.utils: tempdir(), a temporary directory removed when it is garbage collected.

Takes nothing (or a custom path to keep); gives TempDirectory with relpath() and listdir().
Imports stdlib.
"""
from __future__ import annotations

import os
import shutil
import tempfile


class TempDirectory:
    """A directory for a session's files: relpath(name) is a path inside it."""

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool = False) -> None:
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="tvm_")
        # a directory the caller named is theirs: it stays, as in TVM
        self._remove = custom_path is None and not keep_for_debug

    def relpath(self, name: str) -> str:
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list:
        return sorted(os.listdir(self.temp_dir))

    def remove(self) -> None:
        if self._remove:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self._remove = False

    def __enter__(self) -> TempDirectory:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __del__(self) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"


def tempdir(custom_path: str | None = None, keep_for_debug: bool = False) -> TempDirectory:
    return TempDirectory(custom_path, keep_for_debug)


__all__ = ["TempDirectory", "tempdir"]
