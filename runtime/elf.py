"""A check that an ELF shared library is whole before the dynamic loader maps it.

Takes the bytes of a file; gives image_problem(): None, or why the loader must not see it.
dlopen maps segments by the sizes their headers state, without comparing them with the file's
size: a truncated library maps pages past its end and the first touch of one kills the process
with SIGBUS. Imports only the standard library.
"""

from __future__ import annotations

import struct

__all__ = ["image_problem"]

ELF_MAGIC = b"\x7fELF"
# Per ELF class (1: 32-bit, 2: 64-bit): the header after e_ident, from e_type to e_shstrndx,
# and one program header, both as in the ELF specification.
_HEADER = {1: "HHIIIIIHHHHHH", 2: "HHIQQQIHHHHHH"}
_PROGRAM_HEADER = {1: "IIIIIIII", 2: "IIQQQQQQ"}
_SEGMENT_TYPES = {1: "PT_LOAD", 2: "PT_DYNAMIC", 3: "PT_INTERP", 4: "PT_NOTE", 6: "PT_PHDR",
                  7: "PT_TLS"}


def image_problem(image: bytes) -> str | None:
    """None when `image` is a complete ELF file, else a sentence saying what is wrong with it:
    no ELF header, or a header table or segment that reaches past the end of the file."""
    size = len(image)
    if image[:4] != ELF_MAGIC:
        return ("it is not an ELF shared library (it does not start with the ELF magic "
                "bytes)" if size else "the file is empty")
    if size < 6 or image[4] not in _HEADER or image[5] not in (1, 2):
        return "it is not a valid ELF file (unknown ELF class or byte order)"
    elf_class = image[4]
    order = "<" if image[5] == 1 else ">"
    header = struct.Struct(order + _HEADER[elf_class])
    if size < 16 + header.size:
        return _truncated(f"the ELF header needs {16 + header.size} bytes", size)
    (_, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
     _) = header.unpack_from(image, 16)
    program_header = struct.Struct(order + _PROGRAM_HEADER[elf_class])
    if phnum and phentsize != program_header.size:
        return (f"it is not a valid ELF file (program headers of {phentsize} bytes, expected "
                f"{program_header.size})")
    if phoff + phnum * phentsize > size:
        return _truncated(f"its program header table ends at byte {phoff + phnum * phentsize}",
                          size)
    for index in range(phnum):
        fields = program_header.unpack_from(image, phoff + index * phentsize)
        kind = fields[0]
        offset, filesz = (fields[1], fields[4]) if elf_class == 1 else (fields[2], fields[5])
        if filesz and offset + filesz > size:
            name = _SEGMENT_TYPES.get(kind, f"type {kind:#x}")
            return _truncated(f"its segment {index} ({name}) ends at byte {offset + filesz}",
                              size)
    # With more than 0xff00 sections e_shnum is 0 and the first entry holds the count.
    sections_end = shoff + max(shnum, 1) * shentsize
    if shoff and sections_end > size:
        return _truncated(f"its section header table ends at byte {sections_end}", size)
    return None


def _truncated(what: str, size: int) -> str:
    return (f"the file is truncated or corrupt: {what} but the file has only {size} bytes; "
            "copy or export it again")
