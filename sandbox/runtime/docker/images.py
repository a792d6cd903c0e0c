"""Images on the engine, resolved once per runtime: tag -> image ID and labels."""

from __future__ import annotations

import docker
import docker.errors

from skillopt.errors import ImageMissing, SandboxUnavailable

__all__ = ["ImageCache"]


class ImageCache:
    """The image IDs and labels this runtime uses, each looked up once.

    One inspect per image for the runtime's life: Describe (polled by every controller's health
    watch) used to inspect the image on each call. The runtime then creates every container of a
    tag from the ID resolved here, so the digest it reports is the one its containers run even
    when the tag is rebuilt meanwhile (a restart picks the new one)."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client
        self._images: dict[str, tuple[str, dict[str, str]]] = {}  # tag -> (ID, labels)

    def digest(self, image: str) -> str:
        """Image ID (``sha256:…``) of a locally built image.

        Raises:
            ImageMissing: the image is not on this host.
            SandboxUnavailable: the engine did not answer.
        """
        return self._image(image)[0]

    def labels(self, image: str) -> dict[str, str]:
        """The image's ``org.skillopt.*`` labels (build provenance); ``{}`` when unknown."""
        try:
            labels = self._image(image)[1]
        except (ImageMissing, SandboxUnavailable):
            return {}
        return {k: v for k, v in labels.items() if k.startswith("org.skillopt.")}

    def forget(self, image: str) -> None:
        """Look ``image`` up again next time (its resolved ID is gone from the engine)."""
        self._images.pop(image, None)

    def _image(self, image: str) -> tuple[str, dict[str, str]]:
        known = self._images.get(image)
        if known is None:
            try:
                found = self.client.images.get(image)
            except docker.errors.ImageNotFound as exc:
                raise ImageMissing(
                    f"runtime image {image!r} is not built on this host; run: bash docker/build.sh"
                ) from exc
            except docker.errors.DockerException as exc:
                raise SandboxUnavailable(f"Docker engine error looking up {image!r}: {exc}") from exc
            known = self._images[image] = (str(found.id), dict(found.labels or {}))
        return known
