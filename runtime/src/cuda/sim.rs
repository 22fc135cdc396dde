//! A simulated GPU for machines without one (being written).
