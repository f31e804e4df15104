// Fixture of tests/layers: low/ includes nothing of trainkit's. Never compiled.
#pragma once
