"""The exceptions minigrad raises on bad input. Each is also a standard Python exception
(ValueError, IndexError, RuntimeError), so ``except ValueError`` keeps working."""


class MinigradError(Exception):
    """Base of minigrad's own errors; their messages already name the op and the shapes."""


class ShapeError(MinigradError, ValueError):
    """Shapes that do not broadcast, multiply or match."""


class OutOfRangeError(MinigradError, IndexError):
    """An index or a dim outside the tensor."""


class DeviceError(MinigradError, RuntimeError):
    """Tensors on different devices, or a device that is not available."""
