"""Typed parameters: the framework (`base`) and one frozen class per run kind (`kinds`).

This package imports only the core's enums and defaults, so forms, serializers and commands can read it cheaply."""

from .base import ParamsError, ParamSpec, RunParams, param, same_as
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

__all__ = [
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
    "ParamsError",
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
