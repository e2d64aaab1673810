//! scripted server
