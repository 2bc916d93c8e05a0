"""The recorder (named intermediates of every forward pass) and the interventions that write them."""
