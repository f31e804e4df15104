// Fixture of tests/layers: mid/ includes low/ and high/, and high/ includes mid/: a cycle.
#pragma once
#include "trainkit/low/a.hpp"
#include <trainkit/high/c.hpp>
