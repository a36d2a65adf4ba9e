"""A page's host and site (registered domain) from its URL, with the Public Suffix List that ships inside the
`publicsuffixlist` package (its bundled snapshot; nothing is fetched)."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from urllib.parse import urlsplit


@lru_cache(maxsize=1)
def _psl():
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()  # reads the list bundled in the package (no download, no cache folder)


@lru_cache(maxsize=65536)
def registered_domain(host: str) -> str:
    """'docs.example.co.uk' -> 'example.co.uk'; an IP address, 'localhost' or a bare public suffix -> the host."""
    host = host.strip(".").lower()
    if not host:
        return ""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host
    except ValueError:
        pass
    return _psl().privatesuffix(host) or host


def url_host(url: str) -> str:
    """The URL's lower-case host without a port ('' when there is none or the URL does not parse)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def site_of(url: str) -> tuple[str, str]:
    """(host, registered domain) of a URL."""
    host = url_host(url)
    return host, registered_domain(host)
