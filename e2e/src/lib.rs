//! Browser and real-Pi tests live in tests/.
