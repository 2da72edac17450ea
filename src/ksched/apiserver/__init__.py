"""The embedded API server: versioned store, watch, admission, binding and conflict resolver."""
