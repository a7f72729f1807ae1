# loadkit's container image (docs/kubernetes.md). The build stage makes wheels from this source
# tree (loadkit, and the example plugin in plugins/); the image installs them into a slim
# Python and runs as an unprivileged user. Plugins are extra pip packages:
#   docker build -t loadkit .
#   docker build -t loadkit --build-arg EXTRA_PIP="loadkit-anthropic" .   # from plugins/
#   docker build -t loadkit --build-arg EXTRA_PIP="my-plugin==1.2" .      # from your index
# The pods' commands are the entrypoint's: `loadkit run --master ...`, `loadkit run --worker ...`.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . plugins/*/

FROM ${PYTHON_IMAGE}
# Extra pip requirements (plugins), found on the index or among the wheels built above. loadkit
# itself is installed from its wheel by path: never a same-named package from an index.
ARG EXTRA_PIP=""
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --find-links /wheels /wheels/loadkit-*.whl ${EXTRA_PIP} \
    && rm -rf /wheels \
    && groupadd --gid 10001 loadkit \
    && useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin loadkit \
    && mkdir /reports && chown 10001:10001 /reports
# Numeric, so that Kubernetes' runAsNonRoot can check it without reading /etc/passwd.
USER 10001:10001
WORKDIR /home/loadkit
# Locust's master port and web UI.
EXPOSE 5557 8089
ENTRYPOINT ["loadkit"]
CMD ["--help"]
