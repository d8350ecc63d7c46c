"""Built-in tools: file, search, shell, web, messaging, delegation and computer-use handlers."""
