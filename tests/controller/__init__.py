"""Tests of koordpy.controller, one module per controller module where they are unit tests."""
