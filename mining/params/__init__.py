"""Typed parameters: the framework (`base`) and one frozen class per run kind (`kinds`).

This package imports only the core's enums and defaults, so forms, serializers and commands can read it cheaply."""

from ..core.defaults import DEFAULT_ENCODER, DEFAULT_K
from .base import REQUIRED, Params, ParamsError, ParamSpec, RunParams, param, same_as
from .kinds import (
    PARAMS,
    AlignRunParams,
    ApplyCalibrationParams,
    CalibrateParams,
    CalibrationMethod,
    DocModel,
    DocumentRunParams,
    EncoderModel,
    FineTuneParams,
    SelfTrainParams,
    SentenceRunParams,
    TrainDocModelParams,
    TrainEncoderParams,
    params_class,
    start_params,
    stored_params,
)


def default_encoder_name() -> str:
    """The registry name of the app's default encoder: PCAPP_DEFAULT_ENCODER when set, else DEFAULT_ENCODER."""
    from django.conf import settings

    return getattr(settings, "PCAPP_DEFAULT_ENCODER", "") or DEFAULT_ENCODER


__all__ = [
    "default_encoder_name",
    "DEFAULT_ENCODER",
    "DEFAULT_K",
    "PARAMS",
    "AlignRunParams",
    "ApplyCalibrationParams",
    "CalibrateParams",
    "CalibrationMethod",
    "DocModel",
    "DocumentRunParams",
    "EncoderModel",
    "FineTuneParams",
    "ParamSpec",
    "Params",
    "ParamsError",
    "REQUIRED",
    "RunParams",
    "SelfTrainParams",
    "SentenceRunParams",
    "TrainDocModelParams",
    "TrainEncoderParams",
    "param",
    "params_class",
    "same_as",
    "start_params",
    "stored_params",
]
