"""Agent Skills: folders with a ``SKILL.md`` (YAML front matter, then instructions) found in the home and in
trusted projects; their names and descriptions go into the prompt, their bodies load on ``use_skill``."""
