"""The JSON Schema vocabulary the loader reads: type names and aliases, the keywords whose
values are schemas, and those it drops or reads as annotations."""

from __future__ import annotations

# BFCL (Python-flavoured) type names -> JSON Schema; None = no type constraint.
TYPE_ALIASES: dict[str, str | None] = {"dict": "object", "float": "number", "tuple": "array", "any": None}
JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}

# Keywords whose value is a schema, a list of schemas, or a name -> schema map.
SCHEMA_ONE = {
    "additionalProperties",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
}
SCHEMA_LIST = {"anyOf", "oneOf", "allOf", "prefixItems"}
SCHEMA_MAP = {"properties", "patternProperties", "dependentSchemas"}
# Dropped from the output: definitions are inlined, and the result is always 2020-12.
DROPPED = {"$defs", "definitions", "$schema", "$id"}
# Keywords that only annotate; a $ref's siblings made only of these merge into it.
ANNOTATIONS = {
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
}

# Where an object can accept names that its "properties" do not list.
OPENING = {"patternProperties", "allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas"}
