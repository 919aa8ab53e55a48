# toolshim as a sidecar next to Ollama.
#   docker build -t toolshim .
#   docker run -p 8080:8080 -e TOOLSHIM_UPSTREAM=http://ollama:11434 \
#     -v ./toolshim:/etc/toolshim toolshim
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TOOLSHIM_HOST=0.0.0.0 \
    TOOLSHIM_PORT=8080 \
    TOOLSHIM_CAPABILITIES=/etc/toolshim/capabilities.yaml

WORKDIR /app
COPY pyproject.toml README.md ./
COPY proxy ./proxy
RUN pip install --no-cache-dir . \
 && useradd --system --uid 10001 --no-create-home toolshim \
 && mkdir -p /etc/toolshim \
 && chown toolshim /etc/toolshim
# The directory (not only the file) must be writable: learned facts are written
# atomically via a temp file and a lock file beside capabilities.yaml.
COPY --chown=toolshim capabilities.yaml /etc/toolshim/capabilities.yaml

USER toolshim
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["toolshim"]
