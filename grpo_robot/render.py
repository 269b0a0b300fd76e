"""Headless rendering: the OpenGL backend, an offscreen MuJoCo renderer, and frame labels.

MuJoCo renders through one of three OpenGL platforms: EGL (GPU drivers or Mesa), OSMesa (Mesa in
software, works anywhere) and GLFW (needs a display). Which one is used is fixed by `MUJOCO_GL`
when `mujoco`, robosuite or PyOpenGL are first imported, and a process cannot switch afterwards.
So `gl_backend()` tries the candidates in a short child process, once, and exports the first
that renders a frame as `MUJOCO_GL` (and `PYOPENGL_PLATFORM`) for this process and its children;
`Renderer` then opens its context on that platform directly, whatever `mujoco` chose at import,
and so does `mujoco.Renderer` (a user env's) from then on.

Nothing here runs unless a frame is asked for: training and evaluation without video never touch
OpenGL.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import weakref

import mujoco
import numpy as np

logging.getLogger("OpenGL").setLevel(logging.WARNING)  # PyOpenGL says at INFO which optional modules it lacks

# Debian/Ubuntu packages that provide headless OpenGL: EGL and OSMesa through Mesa
GL_PACKAGES = "libegl1 libgl1-mesa-dri libosmesa6"
INSTALL_HINT = f"install headless OpenGL (Debian/Ubuntu: apt-get install -y {GL_PACKAGES})"
CANDIDATES = ("egl", "osmesa")  # tried in this order when MUJOCO_GL is unset
HEADLESS = ("egl", "osmesa")

# A child process renders one frame of a one-box scene; it prints the mean pixel value.
_PROBE = """
import mujoco
m = mujoco.MjModel.from_xml_string(
    '<mujoco><worldbody><light pos="0 0 1"/><geom type="box" size=".1 .1 .1"/></worldbody></mujoco>')
d = mujoco.MjData(m)
mujoco.mj_forward(m, d)
r = mujoco.Renderer(m, 16, 16)
r.update_scene(d)
print(float(r.render().mean()))
r.close()
"""


class RenderError(RuntimeError):
    """No OpenGL backend can render here; the message is one line naming what to install."""


_chosen: str | None = None


def probe(backend: str, timeout: float = 60.0) -> str | None:
    """Render one frame with `MUJOCO_GL=backend` in a child process: None when it works, else the
    reason (the child's last error line)."""
    env = dict(os.environ, MUJOCO_GL=backend)
    env.pop("PYOPENGL_PLATFORM", None)  # mujoco refuses a PYOPENGL_PLATFORM other than its backend's
    if backend in HEADLESS:
        env["PYOPENGL_PLATFORM"] = backend
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True,
                              timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"no frame within {timeout:.0f} s"
    if done.returncode == 0:
        try:
            if float(done.stdout.split()[-1]) > 0:
                return None
        except (ValueError, IndexError):
            pass
        return "rendered a blank frame"
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip() and not line.startswith(" ")]
    return lines[-1] if lines else f"exit code {done.returncode}"


def gl_backend() -> str:
    """The OpenGL platform frames are rendered with: `MUJOCO_GL` when set (checked once), else the
    first of EGL, OSMesa that renders here, the one `PYOPENGL_PLATFORM` names first when it names
    one. Sets `MUJOCO_GL` and `PYOPENGL_PLATFORM` (which mujoco requires to agree) so that this
    process's renderers and every process it starts use the same one. `RenderError` when none works."""
    global _chosen
    if _chosen is not None:
        return _chosen
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    platform = os.environ.get("PYOPENGL_PLATFORM", "").strip().lower()
    candidates = sorted(CANDIDATES, key=lambda backend: backend != platform)  # a headless image's own first
    tried = {}
    for backend in [requested] if requested else candidates:
        reason = probe(backend)
        if reason is None:
            os.environ["MUJOCO_GL"] = backend
            if backend in HEADLESS:
                os.environ["PYOPENGL_PLATFORM"] = backend
                _use_in_mujoco(backend)
            _chosen = backend
            return backend
        tried[backend] = reason
    how = "; ".join(f"MUJOCO_GL={b}: {r}" for b, r in tried.items())
    advice = "unset MUJOCO_GL or set it to egl or osmesa, and " if requested and requested not in HEADLESS else ""
    raise RenderError(f"cannot render frames here ({how}); {advice}{INSTALL_HINT}")


def _context_class(backend: str) -> type:
    if backend == "egl":
        from mujoco.egl import GLContext
    elif backend == "osmesa":
        from mujoco.osmesa import GLContext
    else:
        from mujoco.glfw import GLContext
    return GLContext


def _use_in_mujoco(backend: str) -> None:
    """Have `mujoco.Renderer` open its contexts on `backend` too. It takes them from a class that
    `mujoco` chose by `MUJOCO_GL` when first imported, before the choice here, so a user's env
    that renders with it in this process (a sync video world) would go to GLFW, which without a
    display ends the process (abort) rather than raising."""
    try:
        from mujoco.rendering.classic import gl_context
    except ImportError:  # another layout of mujoco's modules: its renderer keeps its own choice
        return
    cls = _context_class(backend)
    gl_context.GLContext = cls
    if hasattr(mujoco, "GLContext"):
        mujoco.GLContext = cls


_live: weakref.WeakSet = weakref.WeakSet()  # renderers not closed yet
_atexit_registered = False


def _close_all() -> None:
    for renderer in list(_live):
        try:
            renderer.close()
        except Exception:  # a context the platform already released
            pass


def _context(width: int, height: int):
    """An OpenGL context of the chosen platform, made current."""
    global _atexit_registered
    context = _context_class(gl_backend())(width, height)
    context.make_current()
    if not _atexit_registered:
        # after the platform module's own exit handler (which releases the display), so this one
        # runs first: contexts are freed while the display still exists, not at interpreter teardown
        atexit.register(_close_all)
        _atexit_registered = True
    return context


class Renderer:
    """Offscreen frames of one MuJoCo model: `render(data, camera) -> uint8 [height, width, 3]`.

    It reads `data` (positions must be current: `mj_kinematics` or a step has run) and never
    writes it, so rendering cannot change a simulation."""

    def __init__(self, model: mujoco.MjModel, width: int = 320, height: int = 240, max_geom: int = 2000) -> None:
        limit = (model.vis.global_.offwidth, model.vis.global_.offheight)
        if width > limit[0] or height > limit[1]:
            raise ValueError(f"frames of {width}x{height} exceed the model's offscreen buffer "
                             f"{limit[0]}x{limit[1]} (<visual><global offwidth/offheight>)")  # fmt: skip
        self.model, self.width, self.height = model, width, height
        self._gl = self._context = None
        self._gl = _context(width, height)
        self._scene = mujoco.MjvScene(model, maxgeom=max_geom)
        self._option = mujoco.MjvOption()
        self._camera = mujoco.MjvCamera()
        self._context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._context)
        self._rect = mujoco.MjrRect(0, 0, width, height)
        _live.add(self)

    def camera_id(self, camera: str | int) -> int:
        """A camera of the model by name (or index); -1 is MuJoCo's free camera."""
        if isinstance(camera, int | np.integer):
            return int(camera)
        cam = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if cam < 0:
            names = [self.model.camera(i).name for i in range(self.model.ncam)]
            raise ValueError(f"camera {camera!r} is not in the scene; its cameras: {', '.join(names) or 'none'}")
        return cam

    def render(self, data: mujoco.MjData, camera: str | int = -1) -> np.ndarray:
        cam = self.camera_id(camera)
        if cam < 0:
            self._camera.type = mujoco.mjtCamera.mjCAMERA_FREE.value
            mujoco.mjv_defaultFreeCamera(self.model, self._camera)
        else:
            self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED.value
            self._camera.fixedcamid = cam
        self._gl.make_current()
        mujoco.mjv_updateScene(self.model, data, self._option, None, self._camera,
                               mujoco.mjtCatBit.mjCAT_ALL.value, self._scene)  # fmt: skip
        mujoco.mjr_render(self._rect, self._scene, self._context)
        frame = np.empty((self.height, self.width, 3), np.uint8)
        mujoco.mjr_readPixels(frame, None, self._rect, self._context)  # OpenGL's rows run bottom-up
        return np.ascontiguousarray(frame[::-1])

    def close(self) -> None:
        _live.discard(self)
        if self._context is not None:
            self._gl.make_current()
            self._context.free()
            self._context = None
        if self._gl is not None:
            self._gl.free()
            self._gl = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter teardown: the GL library may be gone already
            pass


# -- labels drawn on frames --------------------------------------------------------------------------
GREEN, RED, WHITE = (40, 170, 70), (200, 50, 50), (255, 255, 255)


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: one bitmap size
        return ImageFont.load_default()


def _fit(draw, text: str, font, room: float, keep_start: bool = False) -> str:
    """`text`, cut with "..." where it is wider than `room` pixels: at its start (its end, the
    seed, stays), or with `keep_start` at its end."""
    if draw.textlength(text, font=font) <= room:
        return text
    while len(text) > 1 and draw.textlength(f"{text}..." if keep_start else f"...{text}", font=font) > room:
        text = text[:-1] if keep_start else text[1:]
    return f"{text}..." if keep_start else f"...{text}"


def label_layout(top: str, steps: list[str] | None, bottom: str, width: int, height: int) -> tuple[int, str, str]:
    """(font size, top text, bottom text) for `label` on `width` x `height` frames: the size grows
    with the height, and shrinks (to 8 px) until the top text and the widest step text fit side
    by side; what still does not fit is cut (the top text's start, the bottom text's end)."""
    from PIL import Image, ImageDraw

    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    widest = max(steps, key=len) if steps else ""
    size = max(11, height // 16)
    while size > 8 and measure.textlength(f"{top}    {widest}", font=_font(size)) > width - 8:
        size -= 1
    font = _font(size)
    room = width - 8 - (measure.textlength(f"  {widest}", font=font) if steps else 0)
    return size, _fit(measure, top, font, room), _fit(measure, bottom, font, width - 8, keep_start=True)


def label(frames: np.ndarray, top: str, steps: list[str] | None, bottom: str, ok: bool) -> np.ndarray:
    """`frames [T, H, W, 3]` uint8 with `top` (and `steps[t]`) in a dark bar at the top and `bottom`
    in a green (`ok`) or red bar at the bottom; a new array."""
    from PIL import Image, ImageDraw

    _, height, width, _ = frames.shape
    size, top, bottom = label_layout(top, steps, bottom, width, height)
    font, bar = _font(size), size + 6
    out = np.empty_like(frames)
    for t, frame in enumerate(frames):
        image = Image.fromarray(frame)
        draw = ImageDraw.Draw(image)
        draw.rectangle((0, 0, width, bar), fill=(25, 25, 30))
        draw.text((4, 3), top, fill=WHITE, font=font)
        if steps is not None:
            text = steps[t]
            draw.text((width - 4 - draw.textlength(text, font=font), 3), text, fill=WHITE, font=font)
        draw.rectangle((0, height - bar, width, height), fill=GREEN if ok else RED)
        draw.text((4, height - bar + 3), bottom, fill=WHITE, font=font)
        out[t] = np.asarray(image)
    return out
