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


class CheckpointError(MinigradError, ValueError):
    """A file that ``mg.load`` cannot read: not safetensors, damaged, or not what it claims."""


# -- messages in the user's terms: the op, the shapes, the devices ---------------------------


def snake_case(name: str) -> str:
    """An op's class name as the function users call: Add -> add, BroadcastTo -> broadcast_to."""
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _shapes(tensors) -> str:
    shapes = [str(tuple(t.shape)) for t in tensors]
    return " and ".join(shapes) if shapes else "no tensors"


def check_same_device(op: str, tensors) -> None:
    """Raise a DeviceError naming ``op`` where ``tensors`` are not all on one device."""
    if len({t.device for t in tensors}) > 1:
        described = " and ".join(f"{tuple(t.shape)} on {t.device}" for t in tensors)
        raise DeviceError(
            f"{snake_case(op)}: expected all tensors on the same device, got {described}. "
            "Move them with .to(device) first."
        )


def op_error(op: str, tensors, error: Exception) -> Exception:
    """A NumPy/CuPy error raised inside the forward of ``op``, in the user's terms."""
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    name = snake_case(op)
    if isinstance(error, ValueError) and "broadcast" in message:
        return ShapeError(f"{name}: shapes {_shapes(tensors)} do not broadcast")
    if isinstance(error, TypeError):
        return TypeError(f"{name}: invalid inputs ({_shapes(tensors)}): {message}")
    kind = OutOfRangeError if isinstance(error, IndexError) else ShapeError
    return kind(f"{name}: invalid input shapes {_shapes(tensors)}: {message}")


def check_finite(op: str, stage: str, arrays, inputs) -> None:
    """detect_anomaly's check: raise where one of ``arrays`` holds nan or inf."""
    for array in arrays:
        if array is None or getattr(array.dtype, "kind", "f") not in "fc":
            continue
        if not bool((abs(array) < float("inf")).all()):
            kind = "nan" if bool((array != array).any()) else "inf"
            tensors = [t for t in inputs if hasattr(t, "grad_fn")]
            raise RuntimeError(
                f"detect_anomaly: {op} {stage} produced {kind} values "
                f"(input shapes {_shapes(tensors)})"
            )


def saved_arrays_freed(op_name: str) -> RuntimeError:
    return RuntimeError(
        f"{op_name}: trying to backward through the graph a second time, but the arrays it "
        "saved were freed after the first backward. Pass retain_graph=True to the first "
        "backward() if you need to call it again."
    )


def requires_grad_of_non_float(dtype, shape) -> RuntimeError:
    return RuntimeError(
        f"only floating point tensors can require gradients, but this tensor has "
        f"dtype {dtype} (shape {shape}); convert it with .float() first"
    )


def requires_grad_off_non_leaf() -> RuntimeError:
    return RuntimeError(
        "requires_grad can only be turned off on a leaf tensor; use .detach() instead"
    )


def backward_of_no_graph() -> RuntimeError:
    return RuntimeError(
        "backward: the tensor does not require grad and has no grad_fn: nothing in its "
        "history requires grad (set requires_grad=True on a leaf, or check for no_grad)"
    )


def backward_of_non_scalar(shape) -> RuntimeError:
    return RuntimeError(
        f"backward: grad can be implicitly created only for a scalar output, but the output "
        f"has shape {shape}; pass gradient= (a tensor of that shape), or reduce the output "
        "first, e.g. loss = out.sum()"
    )


def seed_of_wrong_shape(shape, output_shape) -> RuntimeError:
    return RuntimeError(
        f"backward: gradient has shape {shape} but the output has shape {output_shape}; "
        "they must match"
    )


def gradient_of_wrong_shape(node, arg, grad) -> RuntimeError:
    position = next(i for i, a in enumerate(node.inputs) if a is arg)
    return RuntimeError(
        f"{node.name}.backward returned a gradient of shape {grad.shape} for input "
        f"{position} of shape {arg.shape}"
    )


def too_few_gradients(node, grads) -> RuntimeError:
    return RuntimeError(
        f"{node.name}.backward returned {len(grads)} gradients for {len(node.inputs)} inputs"
    )


def modified_in_place(op: str, array, version: int) -> RuntimeError:
    return RuntimeError(
        f"{op} backward: one of the variables needed for gradient computation has been "
        f"modified by an inplace operation: the array of shape {tuple(array.shape)} "
        f"({array.dtype}) that {op} saved for backward was written in place after {op} ran "
        f"(it is at version {version} now). Change a copy instead (y = y + 1, or y.clone()), "
        f"or change it before the op"
    )
