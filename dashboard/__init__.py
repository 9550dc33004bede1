"""PrivSyn Studio's Streamlit dashboard: presentation only; every algorithm is in privsyn_core."""
