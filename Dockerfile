FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY . .
RUN pip install --no-cache-dir . \
 && DEBUG=0 SECRET_KEY=build-only-not-secret python manage.py collectstatic --noinput
RUN useradd --create-home sessionhub && mkdir -p /data/archive && chown sessionhub /data/archive
USER sessionhub
EXPOSE 8000
CMD ["python", "-m", "sessionhub.serve"]
