"""The languages of code runs (``/run_code``): how each one is compiled and run in a container,
and which of them an image offers.

An image lists its languages in the label ``org.skillopt.languages`` (comma-separated;
``docker/polyglot/Dockerfile`` sets it). An image without the label (the default runtime image)
offers what every runtime image has: ``python`` and ``bash``. The commands follow
SandboxFusion's runners (``sandbox/runners/major.py`` of bytedance/SandboxFusion), so a program
written for its ``/run_code`` compiles and runs the same way here: one source file in the
workspace, a compile step for compiled languages, then the program with the request's stdin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sandbox.runtime.base import SandboxRuntime
from skillopt.errors import ImageMissing

__all__ = [
    "BASE_LANGUAGES",
    "LANGUAGES",
    "LANGUAGES_LABEL",
    "POLYGLOT_IMAGE",
    "Language",
    "image_languages",
    "resolve_code_image",
]

#: The image label that lists an image's languages.
LANGUAGES_LABEL = "org.skillopt.languages"


@dataclass(frozen=True)
class Language:
    """How one language's program is built and run (argv, cwd = the workspace)."""

    name: str
    #: The source file the request's code is written to (relative to the workspace).
    source: str
    #: The compile command (empty: interpreted, no compile step).
    compile: tuple[str, ...]
    run: tuple[str, ...]
    #: The program runs in a process forked from the container's warm Python interpreter (as
    #: rollouts' programs do) instead of a new ``python3`` (what ``run`` says): ~20 ms less.
    warm_python: bool = False


LANGUAGES: Mapping[str, Language] = {
    lang.name: lang
    for lang in (
        Language("python", "main.py", (), ("python3", "main.py"), warm_python=True),
        # SandboxFusion runs `pytest <file>`; -p no:cacheprovider: the run leaves no .pytest_cache.
        Language(
            "pytest",
            "test_main.py",
            (),
            ("python3", "-m", "pytest", "-p", "no:cacheprovider", "test_main.py"),
        ),
        Language("bash", "main.sh", (), ("/bin/bash", "main.sh")),
        Language(
            "cpp", "main.cpp", ("g++", "-std=c++17", "main.cpp", "-o", "test", "-lpthread"), ("./test",)
        ),
        Language("nodejs", "main.js", (), ("node", "main.js")),
        Language("go", "main.go", ("go", "build", "-o", "out", "main.go"), ("./out",)),
        # SandboxFusion's convention: the public class is Main; -ea turns assertions on.
        # javac's own JIT stops at C1 (it compiles one file: a third less startup); the program
        # runs with the JVM's defaults.
        Language(
            "java", "Main.java", ("javac", "-J-XX:TieredStopAtLevel=1", "Main.java"), ("java", "-ea", "Main")
        ),
    )
}

#: What an image without the label offers (every runtime image has python3 and bash).
BASE_LANGUAGES = ("python", "bash")


def image_languages(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The languages an image with ``labels`` offers, in :data:`LANGUAGES` order (names this
    host does not know how to run are left out)."""
    raw = labels.get(LANGUAGES_LABEL, "")
    listed = {part.strip() for part in raw.split(",") if part.strip()} if raw else set(BASE_LANGUAGES)
    return tuple(name for name in LANGUAGES if name in listed)


#: The image code runs use when the host is not told otherwise and has it.
POLYGLOT_IMAGE = "skillopt-runtime-polyglot:latest"


def resolve_code_image(requested: str, runtime: SandboxRuntime, base_image: str) -> str:
    """The image of this host's code runs: ``requested``, or (empty) :data:`POLYGLOT_IMAGE`
    when it is built here, else ``base_image``.

    Raises:
        ImageMissing: ``requested`` is not on this host.
    """
    if requested:
        runtime.image_digest(requested)
        return requested
    try:
        runtime.image_digest(POLYGLOT_IMAGE)
    except ImageMissing:
        return base_image
    return POLYGLOT_IMAGE
