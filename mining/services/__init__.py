"""Write-side services of the mining app (one named entry point per state change)."""
