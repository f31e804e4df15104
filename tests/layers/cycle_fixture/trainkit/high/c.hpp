// Fixture of tests/layers: high/ includes mid/ (which includes high/). Never compiled.
#pragma once
#include "trainkit/mid/b.hpp"
