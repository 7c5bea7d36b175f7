"""Pure core: text in, values out."""
