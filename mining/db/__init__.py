"""Database helpers below the services and the importers: bulk COPY and id reservation."""
