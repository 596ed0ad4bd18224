# placeholder: filled by the emulation_host stage
