"""translation"""
