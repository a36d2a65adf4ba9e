"""The review rules' refusals, each with the HTTP status to answer with."""

from __future__ import annotations


class ReviewError(Exception):
    """A request the review rules refuse; `status` is the HTTP status to answer with."""

    status = 400


class StaleItem(ReviewError):
    status = 409


class DuplicateLabel(ReviewError):
    status = 409


class NotAllowed(ReviewError):
    status = 403


class NotFound(ReviewError):
    status = 404
