"""Web crawls in: WARC / WARC.gz / WET files (FastWARC) and folders of saved HTML pages, their main text (resiliparse,
or trafilatura to compare), site and language per page. See docs/IMPORT.md."""

from .pages import Extractor, PageLimits, PageSkip, extract_page
from .reader import CrawlOptions, CrawlPage, PageBuilder, read_crawl, url_key
from .records import RawPage, Skip, warc_records
from .sites import registered_domain, site_of

__all__ = [
    "CrawlOptions",
    "CrawlPage",
    "Extractor",
    "PageBuilder",
    "PageLimits",
    "PageSkip",
    "RawPage",
    "Skip",
    "extract_page",
    "read_crawl",
    "registered_domain",
    "site_of",
    "url_key",
    "warc_records",
]
