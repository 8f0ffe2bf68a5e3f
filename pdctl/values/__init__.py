"""Values files: safe loading with line numbers, and helm-style --set assignments."""
