from typing import Optional, Union

PATHS: tuple[str, ...]

def available_paths() -> list[str]: ...
def crc32c(data: Union[bytes, bytearray, memoryview], crc: int = 0,
           path: Optional[str] = None) -> int: ...
