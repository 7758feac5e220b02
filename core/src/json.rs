//! Zero-copy JSON reader. (Filled in by the bench module work.)
