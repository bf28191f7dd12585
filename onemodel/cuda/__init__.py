"""torch.cuda's questions, which ported scripts ask to choose their device, answered for a
library that runs on the CPU: `om.device("cuda" if om.cuda.is_available() else "cpu")`."""


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0
