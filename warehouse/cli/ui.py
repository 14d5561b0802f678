"""``warehouse ui``: serve the local web page over the configured store (read-only)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``warehouse ui`` to the main app."""

    @app.command("ui")
    def ui(
        port: int = typer.Option(8765, "--port", help="Port to listen on (0: any free port)."),
        host: str = typer.Option(
            "127.0.0.1",
            "--host",
            help="Address to bind. Anything but 127.0.0.1/localhost exposes your runs to the "
            "network (a warning is printed).",
        ),
        open_browser: bool = typer.Option(False, "--open", help="Open the page in a browser."),
    ) -> None:
        """Serve a read-only web page: the three views, the runs, each run, its samples and
        comparisons, from the configured store (local or Elasticsearch). Ctrl-C stops it.

        Example: warehouse ui --open
        """
        from warehouse.output import info
        from warehouse.settings import load
        from warehouse.ui.server import LOCAL_HOSTS, make_server

        server, _ = make_server(load(), host, port)
        if host not in LOCAL_HOSTS:
            info(
                f"[bold yellow]warning:[/] listening on {host}: anyone who can reach this "
                "address can read every run, config and output in this warehouse"
            )
        info(f"warehouse ui at {server.url} (Ctrl-C stops it)")
        if open_browser:
            import webbrowser

            webbrowser.open(server.url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            server.data.store.close()
            if server.data.objects is not None:
                server.data.objects.close()
