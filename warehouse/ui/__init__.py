"""``warehouse ui``: a local, read-only web page over the configured store.

:mod:`warehouse.ui.server` is the HTTP server (standard library only), :mod:`warehouse.ui.api`
what its JSON endpoints answer, and ``static/`` the page, its script and the Vega builds it
renders charts with (shipped here: nothing is fetched from a CDN; licenses in
``static/NOTICE``).
"""
