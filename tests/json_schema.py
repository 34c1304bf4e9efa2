"""A small JSON Schema checker, for the keywords Pydantic's generated schemas use.

The spec tests check spec files against the schema Pydantic AI generates for them, and no JSON Schema library is
among the development dependencies. This checks the keywords that schema uses for data (`$ref`, `anyOf`,
`oneOf`, `allOf`, `const`, `enum`, `type`, `properties`, `required`, `additionalProperties`, `items`,
`prefixItems`, `minItems`, `maxItems`) and treats every other keyword as an annotation; a keyword it doesn't know
that would constrain data fails loudly rather than pass silently.
"""

from __future__ import annotations

from typing import Any, cast

__all__ = ('schema_errors',)

_ANNOTATIONS = {'title', 'description', 'default', 'deprecated', 'format', 'examples', '$defs', 'discriminator'}
_CHECKED = {
    '$ref',
    'anyOf',
    'oneOf',
    'allOf',
    'const',
    'enum',
    'type',
    'properties',
    'required',
    'additionalProperties',
    'items',
    'prefixItems',
    'minItems',
    'maxItems',
}
_TYPES: dict[str, tuple[type, ...]] = {
    'object': (dict,),
    'array': (list,),
    'string': (str,),
    'integer': (int,),
    'number': (int, float),
    'boolean': (bool,),
    'null': (type(None),),
}


def schema_errors(
    instance: object, schema: dict[str, Any], root: dict[str, Any] | None = None, at: str = '$'
) -> list[str]:
    """Where `instance` breaks `schema`, one line per problem; empty when it is valid."""
    root = schema if root is None else root
    unknown = schema.keys() - _CHECKED - _ANNOTATIONS
    assert not unknown, f'the checker does not know the keywords {sorted(unknown)} (at {at})'
    errors: list[str] = []
    if '$ref' in schema:
        name = schema['$ref'].removeprefix('#/$defs/')
        errors += schema_errors(instance, root['$defs'][name], root, at)
    for branch in schema.get('allOf', []):
        errors += schema_errors(instance, branch, root, at)
    errors += _combination_errors(instance, schema, root, at)
    if 'const' in schema and instance != schema['const']:
        errors.append(f'{at}: {instance!r} is not {schema["const"]!r}')
    if 'enum' in schema and instance not in schema['enum']:
        errors.append(f'{at}: {instance!r} is not one of {schema["enum"]!r}')
    if 'type' in schema:
        types = cast('list[str]', schema['type'] if isinstance(schema['type'], list) else [schema['type']])
        if not any(_is_type(instance, name) for name in types):
            errors.append(f'{at}: {instance!r} is not of type {schema["type"]!r}')
            return errors
    if isinstance(instance, dict):
        errors += _object_errors(cast('dict[str, Any]', instance), schema, root, at)
    if isinstance(instance, list):
        errors += _array_errors(cast('list[Any]', instance), schema, root, at)
    return errors


def _combination_errors(instance: object, schema: dict[str, Any], root: dict[str, Any], at: str) -> list[str]:
    errors: list[str] = []
    for keyword in ('anyOf', 'oneOf'):
        if keyword in schema:
            passing = sum(not schema_errors(instance, branch, root, at) for branch in schema[keyword])
            if passing == 0 or (keyword == 'oneOf' and passing > 1):
                errors.append(f'{at}: {instance!r} matches {passing} of the {keyword} branches')
    return errors


def _is_type(instance: object, name: str) -> bool:
    if isinstance(instance, bool) and name in ('integer', 'number'):
        return False
    return isinstance(instance, _TYPES[name])


def _object_errors(instance: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], at: str) -> list[str]:
    errors = [f'{at}: {key!r} is required' for key in schema.get('required', []) if key not in instance]
    properties: dict[str, Any] = schema.get('properties', {})
    extra = schema.get('additionalProperties', True)
    for key, value in instance.items():
        if key in properties:
            errors += schema_errors(value, properties[key], root, f'{at}.{key}')
        elif extra is False:
            errors.append(f'{at}: {key!r} is not allowed')
        elif isinstance(extra, dict):
            errors += schema_errors(value, cast('dict[str, Any]', extra), root, f'{at}.{key}')
    return errors


def _array_errors(instance: list[Any], schema: dict[str, Any], root: dict[str, Any], at: str) -> list[str]:
    errors: list[str] = []
    if len(instance) < schema.get('minItems', 0):
        errors.append(f'{at}: fewer than {schema["minItems"]} items')
    if 'maxItems' in schema and len(instance) > schema['maxItems']:
        errors.append(f'{at}: more than {schema["maxItems"]} items')
    prefix: list[Any] = schema.get('prefixItems', [])
    for index, item in enumerate(instance):
        item_schema = prefix[index] if index < len(prefix) else schema.get('items', True)
        if item_schema is False:
            errors.append(f'{at}[{index}]: no item is allowed here')
        elif isinstance(item_schema, dict):
            errors += schema_errors(item, cast('dict[str, Any]', item_schema), root, f'{at}[{index}]')
    return errors
