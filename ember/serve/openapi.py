"""The OpenAPI 3.1 description of a server's routes, with the served model's declared
inputs in the predict request schema."""
from __future__ import annotations

from typing import Any, Sequence

from ..pretrained import InputSpec

__all__ = ["openapi_schema"]

_ERROR = {"description": "an error", "content": {"application/json": {"schema": {
    "$ref": "#/components/schemas/Error"}}}}


def _tensor_schema(spec: InputSpec) -> dict[str, Any]:
    shape = ", ".join("any" if n is None else str(n) for n in spec.shape)
    return {"description": f"{spec.dtype} tensor of shape ({shape}); dim 0 may be left "
                           f"out for one example when it is dynamic",
            "oneOf": [{"$ref": "#/components/schemas/Tensor"}, {"type": "array"}]}


def openapi_schema(inputs: Sequence[InputSpec], model_class: str, generates: bool,
                   version: str) -> dict[str, Any]:
    """The schema served at ``GET /openapi.json``."""
    def simple(summary: str, ok: str) -> dict[str, Any]:
        return {"get": {"summary": summary, "responses": {"200": {"description": ok}}}}

    predict_body = {"type": "object", "required": ["inputs"], "properties": {"inputs": {
        "type": "object", "required": [s.name for s in inputs],
        "properties": {s.name: _tensor_schema(s) for s in inputs}}}}
    if len(inputs) == 1:
        predict_body = {"oneOf": [predict_body, {"type": "array",
                                                 "description": "the single input's data"}]}
    paths: dict[str, Any] = {
        "/healthz": simple("liveness", "the process serves requests"),
        "/readyz": {"get": {"summary": "readiness", "responses": {
            "200": {"description": "the model is loaded and warmed up"}, "503": _ERROR}}},
        "/metrics": simple("Prometheus metrics (text format 0.0.4)", "the metrics"),
        "/v1/model": simple("the served model and its declared inputs", "model info"),
        "/v1/predict": {"post": {
            "summary": f"run the model ({model_class}); requests are batched dynamically",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": predict_body}}},
            "responses": {"200": {"description": "the outputs", "content": {
                "application/json": {"schema": {"type": "object", "properties": {
                    "outputs": {"type": "object", "additionalProperties": {
                        "$ref": "#/components/schemas/Tensor"}}}}}}},
                "400": _ERROR, "413": _ERROR, "422": _ERROR, "503": _ERROR}}},
    }
    if generates:
        paths["/v1/generate"] = {"post": {
            "summary": "generate tokens (greedy at temperature 0, else sampled), with a "
                       "KV cache; stream=true sends server-sent events",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["prompt"], "properties": {
                    "prompt": {"oneOf": [{"type": "array", "items": {"type": "integer"}},
                                         {"type": "string"}]},
                    "max_new_tokens": {"type": "integer", "minimum": 0, "default": 32},
                    "temperature": {"type": "number", "minimum": 0, "default": 0},
                    "top_k": {"type": ["integer", "null"], "minimum": 1},
                    "top_p": {"type": ["number", "null"], "exclusiveMinimum": 0,
                              "maximum": 1},
                    "seed": {"type": ["integer", "null"]},
                    "stream": {"type": "boolean", "default": False}}}}}},
            "responses": {"200": {"description": "the generated tokens (JSON), or one "
                                                 "server-sent event per token"},
                          "400": _ERROR, "413": _ERROR, "422": _ERROR, "503": _ERROR}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": f"ember serve: {model_class}", "version": version},
        "paths": paths,
        "components": {"schemas": {
            "Tensor": {"type": "object", "required": ["data"], "properties": {
                "data": {"type": "array"},
                "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                "dtype": {"type": "string"}}},
            "Error": {"type": "object", "required": ["error"], "properties": {
                "error": {"type": "string"}}}}},
    }
