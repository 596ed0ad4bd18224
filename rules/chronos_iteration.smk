# placeholder: filled by the chronos_iteration stage
