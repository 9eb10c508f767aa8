# The image deploy/kubernetes/daemonset.yaml runs: acceptmon on Python's slim image, as a non-root user.
#   docker build -t acceptmon:0.1.0 .   (then push it where your nodes pull from)
# The slim image has no C compiler, so the build skips the fast lane's C matcher: `parse` and the start-up
# scan of `serve` use their pure-Python lane, with the same results (slower on large files; the kubelet
# rotates container logs at 10 MiB by default).
# Python 3.11: the oldest the package supports, and the one its tests run on.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml hatch_build.py README.md ./
COPY acceptmon ./acceptmon
COPY grammars ./grammars
COPY rules ./rules
COPY sample_logs ./sample_logs
RUN pip install . \
    && rm -rf /src \
    && groupadd --system --gid 65532 acceptmon \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin acceptmon

WORKDIR /
# Numeric, so that Kubernetes' runAsNonRoot can check it (the DaemonSet's runAsUser is the same).
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["acceptmon"]
CMD ["--help"]
