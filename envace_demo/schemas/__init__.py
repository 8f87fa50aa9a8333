"""Tool schemas: load what people paste, in any common dialect, into one form.

Accepted dialects (mixed freely in one list):

- OpenAI chat tools ``{"type": "function", "function": {name, description, parameters}}``
  and the flat Responses-API form ``{"type": "function", "name": ..., ...}``;
- bare function objects ``{name, description, parameters}``;
- BFCL: ``"dict"``/``"float"``/``"tuple"``/``"any"`` types, ``"optional"`` flags,
  dotted names, ``required`` naming unlisted properties;
- pydantic JSON Schema: ``$defs``/``$ref``, ``anyOf``, ``title``, ``default``;
- Anthropic/MCP ``input_schema``/``inputSchema`` in place of ``parameters``, and a
  declared output under ``response``/``returns``/``output_schema``/``outputSchema``.

The result is a list of :class:`Tool`: an API-safe name, and a Draft 2020-12 JSON
Schema with local ``$ref`` inlined (constrained decoders and prompts want one
self-contained object), checked with jsonschema's ``check_schema``.

Error locations: every tool is addressed as ``tools[i]`` whatever the input's
shape (a single tool is ``tools[0]``; ``{"tools": [...]}`` and a plain list read
the same). Below that, the path follows what was pasted, so an OpenAI-wrapped tool
reads ``tools[0].function.parameters.properties.unit.type``. Problems with the
text as a whole (JSON syntax, size, empty input) are located at ``input``.

Modules, one concern each: :mod:`.tools` (the dialects, :class:`Tool`, argument checks),
:mod:`.guards` (hostile input: size, depth, strict JSON, before any walk),
:mod:`.normalize` (one schema document to 2020-12), :mod:`.metaschema` (the metaschema
check in one pass), :mod:`.keywords` (the vocabulary) and :mod:`.paths` (error locations).
"""

from envace_demo.policy import InputPolicy
from envace_demo.schemas.guards import check_plain_json
from envace_demo.schemas.tools import Tool, find_tool, load_tools, validate_arguments

__all__ = ["InputPolicy", "Tool", "check_plain_json", "find_tool", "load_tools", "validate_arguments"]
