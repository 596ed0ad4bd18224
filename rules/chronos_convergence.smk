# placeholder: filled by the chronos_convergence stage
