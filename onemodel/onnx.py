"""torch.onnx's entry point, so that a ported script imports; exporting is refused by name."""
from typing import Any


def export(*args: Any, **kwargs: Any) -> None:
    raise NotImplementedError("onnx.export: ONNX export is not available in onemodel; save the "
                              "weights with onemodel.save or onemodel.interop")
