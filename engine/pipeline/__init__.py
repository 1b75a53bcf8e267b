"""The write path and the read path: short orchestrators over named, typed stages."""
