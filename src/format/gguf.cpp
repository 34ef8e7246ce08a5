// Placeholder translation unit replaced by the reader implementation.
