# The wheel is built in its own stage and installed like any Python tool: the image holds the package
# (templates, static files and migrations inside it), not the source tree.
FROM python:3.11-slim-bookworm AS wheel
WORKDIR /src
COPY . /src
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap libseccomp2 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=wheel /dist /dist
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install --no-cache-dir "$(ls /dist/emuplan-*.whl)[postgres]" && rm -rf /dist
# The server runs as an unprivileged user of its own: bubblewrap then builds each model sandbox in a user
# namespace (docker/seccomp.json allows that and no more). /data, the volume's mount point, is its; a volume made
# by an image that ran as root needs `docker compose run --rm --user root emuplan chown -R emuplan: /data` once.
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin emuplan \
    && mkdir -p /data && chown emuplan:emuplan /data
WORKDIR /data
USER emuplan
# Safe by default without compose too (`docker run -p 127.0.0.1:8000:8000 IMAGE`): listening on the
# container's interface, so the published port reaches it, with sign-in on; a published port arrives
# from the bridge's address, so the loopback names are listed rather than left to the default.
ENV EMUPLAN_HOST=0.0.0.0 EMUPLAN_AUTH=accounts EMUPLAN_ALLOWED_HOSTS=localhost,127.0.0.1 \
    EMUPLAN_DATABASE_URL=sqlite:////data/emuplan.sqlite3
EXPOSE 8000
CMD ["emuplan", "serve"]
